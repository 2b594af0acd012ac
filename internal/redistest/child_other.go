//go:build !linux

package redistest

import "syscall"

// ChildAttr is what a test's child process is started with: elsewhere
// than Linux, nothing (a test binary that dies leaves its children).
func ChildAttr() *syscall.SysProcAttr { return nil }
