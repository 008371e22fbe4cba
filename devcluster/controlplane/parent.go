package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// parentPIDEnv names the process that supervises this one; see followParent.
const parentPIDEnv = "DEVCLUSTER_PARENT_PID"

// init runs on the process's main thread, which lives as long as the process: the kernel keeps
// the parent-death signal per thread, so setting it on a thread that may exit would lose it.
func init() {
	followParent()
}

// followParent makes the kernel kill this process when its supervisor dies, so a killed test or
// daemon never leaves a control plane running. The supervisor can do this only with unsafe code
// between fork and exec; here it is an ordinary system call.
//
// SIGKILL rather than SIGTERM: all components get the signal at once, and a kube-apiserver
// shutting down gracefully while etcd vanishes under it can wait minutes on its storage. Nobody
// uses a cluster whose supervisor is gone; graceful stops are the supervisor's job.
func followParent() {
	value := os.Getenv(parentPIDEnv)
	if value == "" {
		return
	}
	want, err := strconv.Atoi(value)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s=%q is not a process id\n", parentPIDEnv, value)
		os.Exit(2)
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "setting the parent-death signal: %v\n", err)
		os.Exit(1)
	}
	// The supervisor may have died between starting us and the call above.
	if os.Getppid() != want {
		fmt.Fprintf(os.Stderr, "supervisor (pid %d) is gone, exiting\n", want)
		os.Exit(1)
	}
}
