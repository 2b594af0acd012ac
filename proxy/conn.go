package proxy

import (
	"context"
	"crypto/tls"
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
// runs (and the connection's reader is not reading), a background read
// notices a client that hangs up. Bytes read in the meantime are handed
// back to the reader first, so pipelined commands are not lost.
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
	c.Conn.SetReadDeadline(time.Time{}) // the idle timeout does not apply meanwhile
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

// serveConn runs one client connection: read a command, dispatch it, and
// write the replies once nothing more is buffered, until the client leaves,
// breaks the protocol or the server closes the connection.
func (s *Server) serveConn(sess *Session) {
	defer s.closed(sess)
	if tc, ok := sess.nc.(*tls.Conn); ok {
		ctx, cancel := context.WithTimeout(sess.ctx, s.opts.RequestTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			if s.opts.Observer != nil {
				s.opts.Observer.Dropped("tls_handshake")
			}
			s.log.Debug("TLS handshake failed", "addr", sess.addr, "err", err)
			return
		}
	}
	rd := newReader(sess.cc, &s.bufPool)
	defer rd.close()
	rd.before = sess.flush
	rd.waiting = sess.setReadDeadline
	for {
		args, err := rd.next(sess.limits())
		if err != nil {
			if isProtocolError(err) {
				s.protocolErrors.Add(1)
				if s.opts.Observer != nil {
					s.opts.Observer.Dropped("protocol_error")
				}
				s.log.Debug("protocol error, closing the connection", "addr", sess.addr, "err", err)
				sess.write(&Error{Code: "ERR", Msg: err.Error()})
				sess.flush()
			} else if errors.Is(err, os.ErrDeadlineExceeded) {
				s.timedOut.Add(1)
				if s.opts.Observer != nil {
					s.opts.Observer.Dropped("timeout")
				}
				s.log.Debug("client timed out, closing the connection", "addr", sess.addr, "partial", rd.buffered() > 0)
			}
			return
		}
		s.dispatch(sess, args, rd.buffered() > 0)
		sess.partial = false
		if sess.quitting() {
			sess.flush()
			return
		}
	}
}

// setReadDeadline is called before each read of the connection: a partial
// command must be complete within RequestTimeout of the read that first
// waited for its rest; an idle connection is closed after IdleTimeout.
func (s *Session) setReadDeadline(partial bool) {
	o := &s.srv.opts
	switch {
	case partial && !s.partial:
		s.partial, s.deadline = true, true
		s.nc.SetReadDeadline(time.Now().Add(o.RequestTimeout))
	case partial:
		// The deadline set when this command started still runs.
	case o.IdleTimeout > 0:
		s.deadline = true
		s.nc.SetReadDeadline(time.Now().Add(o.IdleTimeout))
	case s.deadline:
		s.deadline = false
		s.nc.SetReadDeadline(time.Time{})
	}
}
