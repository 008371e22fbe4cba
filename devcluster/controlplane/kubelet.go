package main

// The kubelet API of devcluster's simulated nodes: the HTTPS endpoints the API server calls for
// `kubectl logs` (/containerLogs) and `kubectl exec` (/exec). The transport is upstream's: TLS
// with client certificates of the cluster CA, and the CRI streaming library's exec handler, which
// speaks the SPDY and WebSocket channel protocols exactly as a kubelet does. What a log holds and
// how a command enters a pod is devcluster's business: both are delegated to hidden entry points
// of the devcluster binary, which knows the node's files and namespaces.

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// kubeletConfig is written by devcluster (devcluster/src/kubelet/api.rs).
type kubeletConfig struct {
	ClientCAFile string        `json:"clientCaFile"`
	Devcluster   string        `json:"devcluster"`
	Nodes        []kubeletNode `json:"nodes"`
}

type kubeletNode struct {
	Name     string `json:"name"`
	Address  string `json:"address"`
	Port     int    `json:"port"`
	CertFile string `json:"certFile"`
	KeyFile  string `json:"keyFile"`
	// Dir is the node's state directory, which the devcluster entry points read.
	Dir string `json:"dir"`
}

// startErrorExit is the exit code of `devcluster __pod-exec` when the command never ran; the
// reason is then in its error file.
const startErrorExit = 128

func runKubeletAPI(args []string) int {
	set := flag.NewFlagSet("kubelet-api", flag.ContinueOnError)
	configPath := set.String("config", "", "the nodes to serve (JSON, written by devcluster)")
	if err := set.Parse(args); err != nil {
		return 2
	}
	config, err := readKubeletConfig(*configPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubelet-api: %v\n", err)
		return 2
	}
	clientCAs, err := certPool(config.ClientCAFile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubelet-api: %v\n", err)
		return 2
	}
	servers := make([]*http.Server, 0, len(config.Nodes))
	failed := make(chan error, len(config.Nodes))
	for _, node := range config.Nodes {
		server, listener, err := nodeServer(node, config.Devcluster, clientCAs)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kubelet-api: node %s: %v\n", node.Name, err)
			return 1
		}
		servers = append(servers, server)
		go func() { failed <- server.ServeTLS(listener, "", "") }()
	}
	fmt.Fprintf(os.Stderr, "kubelet-api: serving %d nodes\n", len(servers))

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-failed:
		fmt.Fprintf(os.Stderr, "kubelet-api: a server failed: %v\n", err)
		return 1
	case <-signals:
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for _, server := range servers {
			_ = server.Shutdown(ctx)
		}
		return 0
	}
}

func readKubeletConfig(path string) (*kubeletConfig, error) {
	if path == "" {
		return nil, errors.New("--config is required")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the configuration: %w", err)
	}
	var config kubeletConfig
	if err := json.Unmarshal(data, &config); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	return &config, nil
}

func certPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in the client CA file %s", path)
	}
	return pool, nil
}

// nodeServer listens on the node's address now, so a taken port fails the start rather than the
// first request.
func nodeServer(node kubeletNode, devcluster string, clientCAs *x509.CertPool) (*http.Server, net.Listener, error) {
	cert, err := tls.LoadX509KeyPair(node.CertFile, node.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("loading the serving certificate: %w", err)
	}
	address := net.JoinHostPort(node.Address, strconv.Itoa(node.Port))
	listener, err := net.Listen("tcp", address)
	if err != nil {
		return nil, nil, fmt.Errorf("listening on %s: %w", address, err)
	}
	handlers := &nodeHandlers{node: node, devcluster: devcluster}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", handlers.containerLogs)
	for _, pattern := range []string{"/exec/{namespace}/{pod}/{container}", "/exec/{namespace}/{pod}/{uid}/{container}"} {
		mux.HandleFunc("GET "+pattern, handlers.exec)
		mux.HandleFunc("POST "+pattern, handlers.exec)
	}
	server := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 30 * time.Second,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    clientCAs,
			MinVersion:   tls.VersionTLS12,
			// The streaming protocols upgrade HTTP/1.1 connections.
			NextProtos: []string{"http/1.1"},
		},
	}
	return server, listener, nil
}

type nodeHandlers struct {
	node       kubeletNode
	devcluster string
}

// containerLogs runs `devcluster __kubelet-logs`, which answers one status line ("ok", or
// "error <http code> <message>") and then the log.
func (h *nodeHandlers) containerLogs(w http.ResponseWriter, req *http.Request) {
	cmd := exec.CommandContext(req.Context(), h.devcluster, "__kubelet-logs", h.node.Dir,
		req.PathValue("namespace"), req.PathValue("pod"), req.PathValue("container"), req.URL.RawQuery)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if err := cmd.Start(); err != nil {
		http.Error(w, fmt.Sprintf("running %s: %v", h.devcluster, err), http.StatusInternalServerError)
		return
	}
	defer func() { _ = cmd.Wait() }()
	reader := bufio.NewReader(stdout)
	status, err := reader.ReadString('\n')
	if err != nil {
		http.Error(w, fmt.Sprintf("reading the log failed: %v", err), http.StatusInternalServerError)
		return
	}
	if code, message, failed := logFailure(status); failed {
		http.Error(w, message, code)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	copyFlushing(w, reader)
}

func logFailure(status string) (int, string, bool) {
	status = strings.TrimSuffix(status, "\n")
	if status == "ok" {
		return 0, "", false
	}
	rest, isError := strings.CutPrefix(status, "error ")
	if !isError {
		return http.StatusInternalServerError, "unexpected answer from the log reader: " + status, true
	}
	codeText, message, _ := strings.Cut(rest, " ")
	code, err := strconv.Atoi(codeText)
	if err != nil {
		return http.StatusInternalServerError, rest, true
	}
	return code, message, true
}

// copyFlushing sends each chunk as it comes, so a followed log streams.
func copyFlushing(w http.ResponseWriter, from io.Reader) {
	flusher, _ := w.(http.Flusher)
	buffer := make([]byte, 32*1024)
	for {
		n, err := from.Read(buffer)
		if n > 0 {
			if _, werr := w.Write(buffer[:n]); werr != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

func (h *nodeHandlers) exec(w http.ResponseWriter, req *http.Request) {
	options, err := remotecommand.NewOptions(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	namespace, pod := req.PathValue("namespace"), req.PathValue("pod")
	command := req.URL.Query()["command"]
	executor := &podExecutor{node: h.node, devcluster: h.devcluster, namespace: namespace}
	remotecommand.ServeExec(w, req, executor, pod, req.PathValue("uid"), req.PathValue("container"),
		command, options, 4*time.Hour, 30*time.Second, remotecommand.SupportedStreamingProtocols)
}

// podExecutor runs `devcluster __pod-exec`, which enters the container's namespaces and root and
// execs the command in place, so its exit status is the command's.
type podExecutor struct {
	node       kubeletNode
	devcluster string
	namespace  string
}

func (e *podExecutor) ExecInContainer(ctx context.Context, pod, _ string, container string, command []string,
	in io.Reader, out, errOut io.WriteCloser, tty bool, _ <-chan remotecommand.TerminalSize, _ time.Duration) error {
	errorFile, err := os.CreateTemp("", "devcluster-exec-*.err")
	if err != nil {
		return fmt.Errorf("creating the error file: %w", err)
	}
	defer func() { _ = os.Remove(errorFile.Name()) }()
	_ = errorFile.Close()

	args := append([]string{"__pod-exec", e.node.Dir, e.namespace, pod, container, errorFile.Name(), "--"}, command...)
	cmd := exec.CommandContext(ctx, e.devcluster, args...)
	cmd.Stdout = writerOrDiscard(out)
	// A TTY merges stderr into stdout, as a terminal would.
	if tty || errOut == nil {
		cmd.Stderr = cmd.Stdout
	} else {
		cmd.Stderr = errOut
	}
	var stdin io.WriteCloser
	if in != nil {
		if stdin, err = cmd.StdinPipe(); err != nil {
			return err
		}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("running %s: %w", e.devcluster, err)
	}
	if stdin != nil {
		// Not waited for: a client that sends nothing more must not keep the exec open after
		// the command ended; the copy ends with the connection.
		go func() {
			_, _ = io.Copy(stdin, in)
			_ = stdin.Close()
		}()
	}
	waitErr := cmd.Wait()
	return execResult(waitErr, errorFile.Name())
}

func writerOrDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// execResult turns the helper's exit into what ServeExec reports: nil, the command's non-zero
// exit code, or why the command could not run.
func execResult(waitErr error, errorFile string) error {
	if waitErr == nil {
		return nil
	}
	var exitErr *exec.ExitError
	if !errors.As(waitErr, &exitErr) || !exitErr.Exited() {
		return waitErr
	}
	code := exitErr.ExitCode()
	if code == startErrorExit {
		if reason, err := os.ReadFile(errorFile); err == nil && len(reason) > 0 {
			return errors.New(strings.TrimSpace(string(reason)))
		}
	}
	return utilexec.CodeExitError{Err: waitErr, Code: code}
}
