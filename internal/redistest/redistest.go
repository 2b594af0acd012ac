// Package redistest starts Redis masters for tests: real redis-server
// processes on free loopback ports, which a test can kill, pause with
// SIGSTOP, resume and restart empty.
//
// Where redis-server is not installed it falls back to embedded miniredis
// masters and says so loudly on stderr; with CI=true it fails instead,
// because CI must test against the real thing. Faults that miniredis cannot
// play (SIGSTOP) skip their test with the reason printed.
package redistest

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// Server is one master started for a test.
type Server struct {
	// Addr is 127.0.0.1:port; it stays the same across restarts.
	Addr string

	t    testing.TB
	port int
	dir  string
	args []string
	tls  *tls.Config // set: the master listens with TLS only

	mu   sync.Mutex
	cmd  *exec.Cmd
	mini *miniredis.Miniredis
}

var warnOnce sync.Once

// Real reports whether redis-server is available.
func Real() bool {
	_, err := exec.LookPath("redis-server")
	return err == nil
}

// Start starts a master and stops it when the test ends. Extra arguments
// are passed to redis-server (ignored by the embedded fallback).
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	s, err := startOne(t, extra)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// startOne is Start without failing the test, so that StartN can start
// masters side by side (t.Fatal must be called on the test's goroutine).
func startOne(t testing.TB, extra []string) (*Server, error) {
	s := &Server{t: t, dir: t.TempDir(), args: extra}
	if !Real() {
		if os.Getenv("CI") == "true" {
			return nil, errors.New("redistest: redis-server not found and CI=true: CI must run against real Redis masters")
		}
		warnOnce.Do(func() {
			fmt.Fprintln(os.Stderr, "\n"+strings.Repeat("!", 78)+
				"\n!! WARNING: redis-server not found. Integration tests run against EMBEDDED\n"+
				"!! miniredis masters, NOT real Redis. Install redis-server for the real test.\n"+
				strings.Repeat("!", 78))
		})
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			return nil, fmt.Errorf("redistest: miniredis: %w", err)
		}
		s.mini = m
		s.Addr = m.Addr()
		s.port, _ = strconv.Atoi(m.Port())
		t.Cleanup(s.Kill)
		return s, nil
	}
	if err := s.launch(nil); err != nil {
		return nil, fmt.Errorf("redistest: could not start redis-server: %w", err)
	}
	return s, nil
}

// launch starts s on a free port, trying another one when the port was
// taken meanwhile, unless giveUp says the error will not go away.
func (s *Server) launch(giveUp func(error) bool) error {
	var lastErr error
	for range 10 {
		port, err := freePort()
		if err != nil {
			return err
		}
		s.port = port
		s.Addr = "127.0.0.1:" + strconv.Itoa(port)
		if lastErr = s.start(); lastErr == nil {
			s.t.Cleanup(s.Kill)
			return nil
		}
		if giveUp != nil && giveUp(lastErr) {
			break
		}
	}
	return lastErr
}

// StartTLS starts a real redis-server that accepts TLS only on its port,
// with the server certificate and key given, trusting ca for client
// certificates (required if authClients). client is how the harness itself
// reaches it. Without redis-server, or with one built without TLS, the
// test is skipped saying why (under CI=true it fails instead).
func StartTLS(t testing.TB, client *tls.Config, cert, key, ca string, authClients bool, extra ...string) *Server {
	t.Helper()
	if !Real() {
		if os.Getenv("CI") == "true" {
			t.Fatal("redistest: redis-server not found and CI=true")
		}
		t.Skip("SKIPPED: needs a real redis-server with TLS; install redis-server to run it")
	}
	auth := "no"
	if authClients {
		auth = "yes"
	}
	s := &Server{t: t, dir: t.TempDir(), tls: client, args: append([]string{
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca, "--tls-auth-clients", auth,
	}, extra...)}
	noTLS := func(err error) bool { return strings.Contains(strings.ToLower(err.Error()), "tls") }
	err := s.launch(noTLS)
	switch {
	case err == nil:
		return s
	case noTLS(err) && os.Getenv("CI") == "true":
		t.Fatalf("redistest: redis-server cannot serve TLS under CI=true: %v", err)
	case noTLS(err):
		t.Skipf("SKIPPED: this redis-server cannot serve TLS (%v)", err)
	}
	t.Fatalf("redistest: could not start redis-server with TLS: %v", err)
	return nil
}

// given are the ports freePort handed out in this process: it never hands
// one out twice. The kernel may give a port just closed to the next
// listener, and two servers started side by side (StartN) could then be
// given one port: the one that failed to bind it would pass its start
// check on the other's PONG, and two masters would share an address.
var given = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freePort asks the kernel for a free loopback port that no server of
// this process was given before. Another process may take it before
// redis-server binds it; start then fails and Start tries another port.
func freePort() (int, error) {
	for range 1000 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		given.Lock()
		fresh := !given.ports[port]
		given.ports[port] = true
		given.Unlock()
		if fresh {
			return port, nil
		}
	}
	return 0, errors.New("redistest: no loopback port left that this process did not use")
}

func (s *Server) start() error {
	port := []string{"--port", strconv.Itoa(s.port)}
	if s.tls != nil {
		port = []string{"--port", "0", "--tls-port", strconv.Itoa(s.port)}
	}
	args := append(append(port,
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		"--loglevel", "warning",
	), s.args...)
	cmd := exec.Command("redis-server", args...)
	cmd.SysProcAttr = ChildAttr()
	logf, err := os.OpenFile(filepath.Join(s.dir, "redis.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("redis-server exited: %s", lastLines(string(b)))
		default:
		}
		if ping(s.Addr, s.tls) == nil {
			s.mu.Lock()
			s.cmd = cmd
			s.mu.Unlock()
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Kill()
	return fmt.Errorf("redis-server on %s did not answer PING", s.Addr)
}

func lastLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}

func ping(addr string, tlsCfg *tls.Config) error {
	var c net.Conn
	var err error
	d := &net.Dialer{Timeout: 200 * time.Millisecond}
	if tlsCfg != nil {
		c, err = tls.DialWithDialer(d, "tcp", addr, tlsCfg)
	} else {
		c, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	// A master with requirepass answers NOAUTH: it is up all the same.
	if !strings.HasPrefix(line, "+PONG") && !strings.HasPrefix(line, "-NOAUTH") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Kill stops the master at once (SIGKILL): it loses everything it held.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mini != nil {
		s.mini.Close()
		return
	}
	if s.cmd != nil {
		s.cmd.Process.Signal(syscall.SIGCONT)
		s.cmd.Process.Kill()
		s.cmd.Process.Wait()
		s.cmd = nil
	}
}

// Restart kills the master if it runs and starts it again, empty, on the
// same address.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	if s.mini != nil {
		m := miniredis.NewMiniRedis()
		if err := m.StartAddr(s.Addr); err != nil {
			s.t.Fatalf("redistest: restart miniredis: %v", err)
		}
		s.mu.Lock()
		s.mini = m
		s.mu.Unlock()
		return
	}
	var err error
	for range 50 {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("redistest: restart %s: %v", s.Addr, err)
}

// Pause stops the master with SIGSTOP: connections stay open and requests
// queue up unanswered until Resume.
func (s *Server) Pause() {
	s.t.Helper()
	s.signal(syscall.SIGSTOP)
}

// Resume continues a paused master (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mini != nil {
		s.t.Skipf("redistest: embedded masters cannot be paused with %v; install redis-server to run this test", sig)
	}
	if s.cmd != nil {
		s.cmd.Process.Signal(sig)
	}
}

// RequireReal skips the test, saying why, when redis-server is not
// installed (the embedded fallback cannot play what the test needs). Under
// CI=true Start already fails without redis-server.
func RequireReal(t testing.TB, why string) {
	t.Helper()
	if !Real() {
		t.Skipf("SKIPPED: needs a real redis-server (%s); install redis-server to run it", why)
	}
}

// StartN starts n masters, side by side (each one's start is mostly
// waiting for it to answer PING; a test with five masters starts them in
// the time of one).
func StartN(t testing.TB, n int, extra ...string) []*Server {
	t.Helper()
	out := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() { out[i], errs[i] = startOne(t, extra) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}

// Addrs returns the masters' addresses.
func Addrs(servers []*Server) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.Addr
	}
	return out
}
