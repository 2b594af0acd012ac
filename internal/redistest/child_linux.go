package redistest

import "syscall"

// ChildAttr is what a test's child process (a redis-server, a proxy) is
// started with: on Linux it is killed when the test binary dies, so that
// a test binary that dies without running its cleanups (a panic on a
// goroutine other than the test's, a kill) leaves no master or proxy
// running behind it, holding a port and the CPU of the runs after it.
// (The signal follows the thread that started the child; nothing in
// these tests or their dependencies locks a goroutine to a thread, which
// is what makes the Go runtime end one.)
func ChildAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
