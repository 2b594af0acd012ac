//go:build unix

package redisnode

import (
	"fmt"
	"io"
	"slices"
	"syscall"
)

// readDirect reads the replies with readRaw when the connection has a
// file descriptor of its own (TLS connections and in-memory ones do not:
// ok is false, and the caller reads through a buffered reader).
func (p *pipe) readDirect() (ok bool, err error) {
	sc, isSys := p.nc.(syscall.Conn)
	if !isSys || p.tls {
		return false, nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true, err
	}
	return true, p.readRaw(rc)
}

// readRaw reads the replies with the connection's own read calls, inside
// one RawRead for the connection's life: it parses what each read brought
// and hands the complete replies over. When a read came back short of its
// buffer (the socket was drained) and every request is answered, it goes
// straight to waiting for the next readiness edge instead of reading once
// more to be told there is nothing: at one request at a time, a reply
// costs one read system call instead of two.
//
// Why nothing is missed: the poller's edge-triggered readiness is kept
// from one wait to the next within one RawRead (only the start of a
// RawRead or Read resets it), and any byte that reaches the socket after
// a read returned raises a new edge, so the wait returns for it. What a
// short read does not report is a hang-up that arrived before it with
// the data (the read returns the data; the end of the stream would be the
// next read's answer, and its edge came before the read). So a short read
// skips the second read only when no request waits for a reply: then a
// hang-up is learnt at the next write, whose reset raises an edge, as a
// library learns it; while requests wait, the reader reads until the
// socket says it is empty.
func (p *pipe) readRaw(rc syscall.RawConn) error {
	buf := make([]byte, 0, rawReadSize)
	var ferr error
	err := rc.Read(func(fd uintptr) bool {
		for {
			if len(buf) == cap(buf) {
				buf = slices.Grow(buf, cap(buf))
			}
			space := cap(buf) - len(buf)
			n, err := syscall.Read(int(fd), buf[len(buf):cap(buf)])
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
				return false
			case err != nil:
				ferr = fmt.Errorf("read: %w", err)
				return true
			case n == 0:
				ferr = fmt.Errorf("read: %w", io.EOF)
				return true
			}
			buf = buf[:len(buf)+n]
			used := 0
			for used < len(buf) {
				v, m, err := parseReply(buf[used:], 0)
				if err == errIncomplete {
					break
				}
				if err != nil {
					ferr = fmt.Errorf("read: %w", err)
					return true
				}
				used += m
				if err := p.deliver(v); err != nil {
					ferr = err
					return true
				}
			}
			rest := copy(buf, buf[used:])
			buf = buf[:rest]
			if rest == 0 && cap(buf) > 4*rawReadSize {
				buf = make([]byte, 0, rawReadSize) // a large reply is over
			}
			if n < space && p.idle() {
				return false // drained, nothing asked: wait for the next edge
			}
		}
	})
	if ferr != nil {
		return ferr
	}
	return fmt.Errorf("read: %w", err)
}

// idle reports whether no request waits for a reply.
func (p *pipe) idle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.head == len(p.queue) && len(p.open) == 0
}

// rawReadSize is readRaw's buffer: it grows for a reply that does not fit.
const rawReadSize = 16 << 10
