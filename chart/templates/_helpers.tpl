{{/*
Names. The release name is the prefix of every object; with the release name "skyhook-operator"
the webhook configurations get upstream's names (skyhook-operator-validating-webhook, ...).
*/}}
{{- define "skyhook.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "skyhook.controllerName" -}}{{ include "skyhook.fullname" . }}-controller-manager{{- end -}}
{{- define "skyhook.webhookName" -}}{{ include "skyhook.fullname" . }}-webhook{{- end -}}
{{- define "skyhook.cleanupName" -}}{{ include "skyhook.fullname" . }}-cleanup{{- end -}}
{{- define "skyhook.validatingName" -}}{{ include "skyhook.fullname" . }}-validating-webhook{{- end -}}
{{- define "skyhook.mutatingName" -}}{{ include "skyhook.fullname" . }}-mutating-webhook{{- end -}}

{{- define "skyhook.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "skyhook.controllerSelector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "skyhook.webhookSelector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end -}}

{{/*
An image reference from {repository, tag, digest}: repository:tag, plus @digest when a digest is
given; the tag defaults to the chart's appVersion. Call with (dict "image" X "root" $).
*/}}
{{- define "skyhook.image" -}}
{{- $tag := .image.tag | default .root.Chart.AppVersion -}}
{{- if .image.digest -}}
{{- printf "%s:%s@%s" .image.repository $tag .image.digest -}}
{{- else -}}
{{- printf "%s:%s" .image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/*
The controller's resources: the explicit override when set, else sized from estimatedNodeCount (N)
and estimatedPackageCount (P) as upstream does (docs/chart.md "Resource sizing"), in integer
arithmetic so that no float rounding moves a value:
  cpu limit      max(1000, 1.6·N·max(1, 0.4·P)) m  = max(1000, 16·N·max(10, 4·P) / 100)
  cpu request    max(500, cpu limit / 2) m
  memory limit   max(512, 0.8·N·max(1, 0.4·P)) Mi = max(512, 8·N·max(10, 4·P) / 100)
  memory request max(256, 0.4·N) Mi                = max(256, 4·N / 10)
Divisions round down.
*/}}
{{- define "skyhook.controllerResources" -}}
{{- with .Values.controllerManager.manager.resources -}}
{{- toYaml . -}}
{{- else -}}
{{- $n := int .Values.estimatedNodeCount -}}
{{- $p := int .Values.estimatedPackageCount -}}
{{- $factor := max 10 (mul 4 $p) -}}
{{- $cpuLimit := max 1000 (div (mul 16 $n $factor) 100) -}}
{{- $cpuRequest := max 500 (div $cpuLimit 2) -}}
{{- $memLimit := max 512 (div (mul 8 $n $factor) 100) -}}
{{- $memRequest := max 256 (div (mul 4 $n) 10) -}}
limits:
  cpu: {{ printf "%dm" $cpuLimit }}
  memory: {{ printf "%dMi" $memLimit }}
requests:
  cpu: {{ printf "%dm" $cpuRequest }}
  memory: {{ printf "%dMi" $memRequest }}
{{- end -}}
{{- end -}}

{{/*
Resources of the cleanup containers: the explicit override, else the LimitRange's defaults, else a
small fixed fallback (when limitRange is null or false the namespace gives no defaults, and a
namespace with a ResourceQuota would refuse a container without resources).
*/}}
{{- define "skyhook.cleanupResources" -}}
{{- if .Values.cleanup.resources -}}
{{- toYaml .Values.cleanup.resources -}}
{{- else if .Values.limitRange -}}
limits:
  {{- toYaml .Values.limitRange.default | nindent 2 }}
requests:
  {{- toYaml .Values.limitRange.defaultRequest | nindent 2 }}
{{- else -}}
limits:
  cpu: 200m
  memory: 128Mi
requests:
  cpu: 100m
  memory: 64Mi
{{- end -}}
{{- end -}}

{{/*
Placement shared by the controller and the cleanup jobs: the controller's tolerations, selectors
and affinity, so that a cleanup job runs wherever the controller can.
*/}}
{{- define "skyhook.controllerPlacement" -}}
{{- with .Values.controllerManager.selectors }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.controllerManager.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions:
            - key: kubernetes.io/arch
              operator: In
              values: [amd64, arm64]
            - key: kubernetes.io/os
              operator: In
              values: [linux]
            {{- with .Values.controllerManager.nodeAffinity.matchExpressions }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
{{- end -}}

{{- define "skyhook.imagePullSecrets" -}}
{{- with .Values.imagePullSecret }}
imagePullSecrets:
  - name: {{ . }}
{{- end }}
{{- end -}}

{{/* Pod-level hardening shared by every pod of the chart. */}}
{{- define "skyhook.podSecurityContext" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  fsGroup: 10001
  seccompProfile:
    type: RuntimeDefault
{{- end -}}

{{- define "skyhook.containerSecurityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  runAsUser: 10001
  capabilities:
    drop: [ALL]
{{- end -}}

{{/*
The service-account token through a projected volume (automountServiceAccountToken is off on the
pods), with a bounded lifetime; kube clients re-read the file when it rotates.
*/}}
{{- define "skyhook.tokenVolume" -}}
- name: kube-api-access
  projected:
    defaultMode: 0444
    sources:
      - serviceAccountToken:
          path: token
          expirationSeconds: 3607
      - configMap:
          name: kube-root-ca.crt
          items:
            - key: ca.crt
              path: ca.crt
      - downwardAPI:
          items:
            - path: namespace
              fieldRef:
                fieldPath: metadata.namespace
{{- end -}}

{{- define "skyhook.tokenMount" -}}
- name: kube-api-access
  mountPath: /var/run/secrets/kubernetes.io/serviceaccount
  readOnly: true
{{- end -}}

{{/*
What every webhook entry shares: the Service, the path, the CA (only with an existing Secret; the
other modes fill it in at run time), and upstream's failurePolicy, sideEffects and timeout.
Call with (dict "root" $ "path" "/...").
*/}}
{{- define "skyhook.webhookClient" -}}
admissionReviewVersions: [v1]
clientConfig:
  service:
    name: {{ .root.Values.webhook.serviceName }}
    namespace: {{ .root.Release.Namespace }}
    path: {{ .path }}
    port: {{ .root.Values.webhookService.port }}
  {{- if eq .root.Values.webhook.certificates.mode "secret" }}
  caBundle: {{ .root.Values.webhook.certificates.caBundle }}
  {{- end }}
failurePolicy: Fail
matchPolicy: Equivalent
sideEffects: None
timeoutSeconds: {{ .root.Values.webhook.timeoutSeconds }}
{{- end -}}

{{/*
A pre-delete Job running kubectl once per command, in order (one container each: the cleanup image
is kubectl alone, without a shell). Call with (dict "root" $ "name" N "commands" (list (list args...))).
*/}}
{{- define "skyhook.cleanupJob" -}}
{{- $root := .root -}}
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "skyhook.labels" $root | nindent 4 }}
    app.kubernetes.io/component: cleanup
  annotations:
    helm.sh/hook: pre-delete
    helm.sh/hook-weight: "0"
    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
spec:
  backoffLimit: 1
  activeDeadlineSeconds: {{ $root.Values.cleanup.jobTimeoutSeconds }}
  ttlSecondsAfterFinished: 600
  template:
    metadata:
      labels:
        {{- include "skyhook.labels" $root | nindent 8 }}
        app.kubernetes.io/component: cleanup
    spec:
      serviceAccountName: {{ include "skyhook.cleanupName" $root }}
      automountServiceAccountToken: false
      restartPolicy: Never
      {{- include "skyhook.imagePullSecrets" $root | nindent 6 }}
      {{- include "skyhook.podSecurityContext" $root | nindent 6 }}
      {{- include "skyhook.controllerPlacement" $root | nindent 6 }}
      {{- $last := sub (len .commands) 1 }}
      {{- if gt $last 0 }}
      initContainers:
      {{- range $i, $args := .commands }}
      {{- if lt $i $last }}
        {{- include "skyhook.cleanupContainer" (dict "root" $root "index" $i "args" $args) | nindent 8 }}
      {{- end }}
      {{- end }}
      {{- end }}
      containers:
        {{- include "skyhook.cleanupContainer" (dict "root" $root "index" $last "args" (index .commands $last)) | nindent 8 }}
      volumes:
        - name: tmp
          emptyDir:
            sizeLimit: 16Mi
        {{- include "skyhook.tokenVolume" $root | nindent 8 }}
{{- end -}}

{{- define "skyhook.cleanupContainer" -}}
- name: kubectl-{{ .index }}
  image: {{ include "skyhook.image" (dict "image" .root.Values.cleanup.image "root" .root) }}
  args:
    {{- toYaml .args | nindent 4 }}
    # The root filesystem is read-only; kubectl's discovery cache goes to the scratch volume.
    - --cache-dir=/tmp/kube-cache
  resources:
    {{- include "skyhook.cleanupResources" .root | nindent 4 }}
  {{- include "skyhook.containerSecurityContext" .root | nindent 2 }}
  volumeMounts:
    - name: tmp
      mountPath: /tmp
    {{- include "skyhook.tokenMount" .root | nindent 4 }}
{{- end -}}

{{/*
The controller's /metrics address: controllerManager.manager.env.metricsPort, or by default
upstream's ":8443" when metrics.secure (HTTPS) and ":8080" otherwise.
*/}}
{{- define "skyhook.metricsPort" -}}
{{- $explicit := .Values.controllerManager.manager.env.metricsPort -}}
{{- if $explicit -}}{{ $explicit }}{{- else if .Values.metrics.secure -}}:8443{{- else -}}:8080{{- end -}}
{{- end }}

{{/*
The metrics Service port: metricsService.port, or by default the same as the container's.
*/}}
{{- define "skyhook.metricsServicePort" -}}
{{- if .Values.metricsService.port -}}{{ .Values.metricsService.port }}{{- else -}}{{ include "skyhook.metricsPort" . | trimPrefix ":" }}{{- end -}}
{{- end }}
