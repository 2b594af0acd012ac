package proxy

import (
	"errors"
	"net"
	"os"
	"sync"
	"time"
)

// maxWatchBuffer bounds what a watched connection buffers from a client
// that keeps sending while its blocking command runs.
const maxWatchBuffer = 64 << 10

// clientConn wraps a client's net.Conn so that, while a blocking command
// runs (and redcon is not reading), a background read notices a client that
// hangs up. Bytes read in the meantime are handed back to redcon's reader
// first, so pipelined commands are not lost.
type clientConn struct {
	net.Conn

	mu      sync.Mutex
	pending []byte
	err     error // a read error seen while watching (the peer is gone)
}

// Read implements net.Conn, serving bytes read while watching first.
func (c *clientConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		if len(c.pending) == 0 {
			c.pending = nil
		}
		c.mu.Unlock()
		return n, nil
	}
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, err
	}
	c.mu.Unlock()
	return c.Conn.Read(p)
}

// watch reads in the background until stop is called, calling gone if the
// peer hangs up (or the read fails) meanwhile. It must only be called while
// nothing else reads the connection.
func (c *clientConn) watch(gone func()) (stop func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		var buf [512]byte
		for {
			n, err := c.Conn.Read(buf[:])
			c.mu.Lock()
			c.pending = append(c.pending, buf[:n]...)
			full := len(c.pending) >= maxWatchBuffer
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				c.err = err
				c.mu.Unlock()
				gone()
				return
			}
			c.mu.Unlock()
			if err != nil || full {
				return
			}
		}
	}()
	return func() {
		// Unblock the background read, as net/http does.
		c.Conn.SetReadDeadline(time.Unix(1, 0))
		<-done
		c.Conn.SetReadDeadline(time.Time{})
	}
}

// listener wraps accepted connections in clientConn. After stop it refuses
// new connections but keeps Accept blocked until release, so that redcon
// does not close the connections still finishing their commands.
type listener struct {
	net.Listener
	stopOnce    sync.Once
	releaseOnce sync.Once
	released    chan struct{}
}

func newListener(ln net.Listener) *listener {
	return &listener{Listener: ln, released: make(chan struct{})}
}

// Accept implements net.Listener. Transient errors (out of file
// descriptors) are retried here with a growing pause rather than spun on.
func (l *listener) Accept() (net.Conn, error) {
	var pause time.Duration
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			return &clientConn{Conn: c}, nil
		}
		if errors.Is(err, net.ErrClosed) {
			<-l.released
			return nil, net.ErrClosed
		}
		pause = min(max(2*pause, 5*time.Millisecond), time.Second)
		select {
		case <-time.After(pause):
		case <-l.released:
			return nil, net.ErrClosed
		}
	}
}

// stop closes the socket: no new connections.
func (l *listener) stop() {
	l.stopOnce.Do(func() { l.Listener.Close() })
}

// release lets Accept return, which makes redcon close every connection.
func (l *listener) release() {
	l.stop()
	l.releaseOnce.Do(func() { close(l.released) })
}
