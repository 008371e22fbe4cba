package main

import (
	"fmt"

	etcdversion "go.etcd.io/etcd/api/v3/version"
	k8sversion "k8s.io/component-base/version"
)

// versions names the upstream releases this binary was built from, so a log shows what ran.
func versions() string {
	return fmt.Sprintf("kubernetes %s, etcd %s", k8sversion.Get().GitVersion, etcdversion.Version)
}
