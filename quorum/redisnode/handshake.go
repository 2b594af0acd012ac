package redisnode

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// dialConn dials the script connection. Before it hands the connection
// over, it asks the master for its run_id (INFO server) and records it with
// a new connection number, so that the engine sees a restarted master
// before the first script runs on the new connection.
func (n *Node) dialConn(ctx context.Context, addr string, d *net.Dialer, tlsCfg *tls.Config) (net.Conn, error) {
	var conn net.Conn
	var err error
	if tlsCfg != nil {
		conn, err = (&tls.Dialer{NetDialer: d, Config: tlsCfg}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	runID, err := handshake(conn, n.opts.Username, n.opts.Password, time.Now().Add(n.opts.DialTimeout))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("redisnode: handshake with %s: %w", addr, err)
	}
	n.identity.Store(&quorum.Identity{RunID: runID, Conn: n.conns.Add(1)})
	return conn, nil
}

// handshake authenticates if asked to and reads the run_id. A master that
// does not answer INFO server (an embedded test master) gives "".
func handshake(conn net.Conn, user, pass string, deadline time.Time) (string, error) {
	conn.SetDeadline(deadline)
	defer conn.SetDeadline(time.Time{})
	// Byte by byte reads: nothing may be consumed beyond our replies, since
	// the connection goes on to the pipe's reader.
	r := bufio.NewReaderSize(oneByte{conn}, 16)
	if pass != "" {
		args := []string{"AUTH", pass}
		if user != "" {
			args = []string{"AUTH", user, pass}
		}
		if _, err := conn.Write(command(args...)); err != nil {
			return "", err
		}
		line, err := readLine(r)
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(line, "-") {
			return "", errors.New(line[1:])
		}
	}
	if _, err := conn.Write(command("INFO", "server")); err != nil {
		return "", err
	}
	line, err := readLine(r)
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(line, "-") {
		return "", nil
	}
	if !strings.HasPrefix(line, "$") {
		return "", fmt.Errorf("unexpected INFO reply %q", line)
	}
	size, err := strconv.Atoi(line[1:])
	if err != nil || size < 0 || size > 1<<20 {
		return "", fmt.Errorf("bad INFO length %q", line)
	}
	body := make([]byte, size+2)
	if _, err := io.ReadFull(r, body); err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(body), "\r\n") {
		if v, ok := strings.CutPrefix(l, "run_id:"); ok {
			return v, nil
		}
	}
	return "", nil
}

func command(args ...string) []byte {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, "$"+strconv.Itoa(len(a))+"\r\n"+a+"\r\n"...)
	}
	return b
}

func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// oneByte reads at most one byte per Read, so that a bufio.Reader on top of
// it never reads ahead of what it is asked for.
type oneByte struct{ r io.Reader }

// Read implements io.Reader, one byte at a time.
func (o oneByte) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}
