package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// Keys of session values in these tests: distinct types, so distinct keys.
type (
	keyA struct{}
	keyB struct{}
)

// TestSessionValue: Value makes a key's value once, even for callers that
// race, and keeps keys apart; Lookup sees only what Value made; a value
// made after the connection ended has its close hook run at once.
func TestSessionValue(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, s *Session)
	}{
		{"one value per key, made once by racing callers", func(t *testing.T, s *Session) {
			var made sync.Map // key name → times made
			var wg sync.WaitGroup
			got := make([]any, 16)
			for i := range got {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var key any = keyA{}
					if i%2 == 1 {
						key = keyB{}
					}
					got[i] = s.Value(key, func() any {
						n, _ := made.LoadOrStore(fmt.Sprintf("%T", key), new(int))
						*n.(*int)++
						return new(int)
					})
				}()
			}
			wg.Wait()
			for i, v := range got {
				if v != got[i%2] {
					t.Errorf("caller %d got %p, caller %d got %p: want one value per key", i, v, i%2, got[i%2])
				}
			}
			if got[0] == got[1] {
				t.Errorf("keyA and keyB share the value %p", got[0])
			}
			made.Range(func(k, n any) bool {
				if *n.(*int) != 1 {
					t.Errorf("%v made %d times, want once", k, *n.(*int))
				}
				return true
			})
		}},
		{"lookup sees only what value made", func(t *testing.T, s *Session) {
			if v, ok := s.Lookup(keyA{}); ok {
				t.Fatalf("Lookup before Value = %v, true", v)
			}
			want := s.Value(keyA{}, func() any { return "a" })
			if v, ok := s.Lookup(keyA{}); !ok || v != want {
				t.Fatalf("Lookup = %v, %v; want %v, true", v, ok, want)
			}
			if v, ok := s.Lookup(keyB{}); ok {
				t.Fatalf("Lookup(keyB) = %v, true; only keyA was made", v)
			}
		}},
		{"hooks run once, in order, a panic stops none", func(t *testing.T, s *Session) {
			var ran []string
			s.OnClose(func() { ran = append(ran, "first") })
			s.OnClose(func() { panic("hook exploded") })
			s.OnClose(func() { ran = append(ran, "third") })
			s.runClosers()
			s.runClosers()
			if want := []string{"first", "third"}; !slices.Equal(ran, want) {
				t.Fatalf("hooks ran %q, want %q", ran, want)
			}
		}},
		{"a hook registered after the end runs at once", func(t *testing.T, s *Session) {
			s.runClosers()
			ran := false
			s.OnClose(func() { ran = true })
			if !ran {
				t.Fatal("OnClose after the end did not run its function")
			}
		}},
		{"a value made after the end is cleaned up at once", func(t *testing.T, s *Session) {
			s.runClosers()
			cleaned := false
			s.Value(keyA{}, func() any {
				s.OnClose(func() { cleaned = true })
				return 1
			})
			if !cleaned {
				t.Fatal("the value's close hook did not run")
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := New(Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			tc.run(t, &Session{srv: srv})
		})
	}
}

// hookLog records, in order, what the commands and close hooks of
// TestSessionOnClose did.
type hookLog struct {
	mu  sync.Mutex
	got []string
}

func (l *hookLog) add(s string) {
	l.mu.Lock()
	l.got = append(l.got, s)
	l.mu.Unlock()
}

func (l *hookLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

// TestSessionOnClose: however a connection ends, its close hooks (those
// registered directly and a session value's) run once, in the order they
// were registered, after the command still running returned (finished, or
// cancelled by the end); a hook that
// panics stops neither the others nor the server.
func TestSessionOnClose(t *testing.T) {
	tests := []struct {
		name string
		// end ends the connection while PARK runs; release lets PARK return.
		end func(t *testing.T, conn net.Conn, srv *Server, release func())
	}{
		{"client hangs up", func(t *testing.T, conn net.Conn, _ *Server, release func()) {
			conn.Close()
			release()
		}},
		{"QUIT", func(t *testing.T, conn net.Conn, _ *Server, release func()) {
			io.WriteString(conn, "QUIT\r\n")
			release()
			r := bufio.NewReader(conn)
			for _, want := range []string{"+parked\r\n", "+OK\r\n"} {
				if line, err := r.ReadString('\n'); line != want {
					t.Fatalf("read %q, %v; want %q", line, err, want)
				}
			}
		}},
		{"protocol error", func(t *testing.T, conn net.Conn, _ *Server, release func()) {
			io.WriteString(conn, "*1\r\n$x\r\n")
			release()
		}},
		{"server shuts down", func(t *testing.T, _ net.Conn, srv *Server, _ func()) {
			// PARK returns when its context is cancelled.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			log := &hookLog{}
			parked, release := make(chan struct{}), make(chan struct{})
			cmds := []*Command{
				// HOOK name: registers a close hook logging name (a panic
				// for "boom"), after making the session's value, which
				// logs "value" when cleaned up; answers how many HOOKs
				// used that value.
				{Name: "hook", Arity: 2, Handler: func(_ context.Context, s *Session, args [][]byte) (any, error) {
					n := s.Value(keyA{}, func() any {
						s.OnClose(func() { log.add("value") })
						return new(int)
					}).(*int)
					*n++
					name := string(args[0])
					s.OnClose(func() {
						if name == "boom" {
							panic("hook exploded")
						}
						log.add("hook " + name)
					})
					return int64(*n), nil
				}},
				// PARK: waits until released, or its client hangs up, or
				// the server shuts down.
				{Name: "park", Arity: 1, Flags: FlagMayBlock, Handler: func(ctx context.Context, _ *Session, _ [][]byte) (any, error) {
					close(parked)
					select {
					case <-release:
					case <-ctx.Done():
					}
					log.add("park returned")
					return SimpleString("parked"), nil
				}},
			}
			srv, err := New(Options{Commands: cmds, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ln) }()
			conn := dialTest(t, ln.Addr().String())
			r := bufio.NewReader(conn)
			io.WriteString(conn, "HOOK a\r\nHOOK boom\r\nHOOK b\r\n")
			for _, want := range []string{":1\r\n", ":2\r\n", ":3\r\n"} {
				if line, err := r.ReadString('\n'); line != want {
					t.Fatalf("HOOK answered %q, %v; want %q", line, err, want)
				}
			}
			io.WriteString(conn, "PARK\r\n")
			<-parked
			tc.end(t, conn, srv, func() { close(release) })
			// Shutdown returns once every connection's end (hooks
			// included) is done.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-served; err != nil {
				t.Fatalf("Serve returned %v", err)
			}
			if got, want := log.all(), []string{"park returned", "value", "hook a", "hook b"}; !slices.Equal(got, want) {
				t.Fatalf("ran %q, want %q", got, want)
			}
		})
	}
}
