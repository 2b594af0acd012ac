package tests

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// rawExchange sends raw bytes on a new connection and returns the first
// reply line and whether the proxy then closed the connection.
func rawExchange(t testing.TB, addr, send string) (reply string, closed bool) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, send); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	reply, err = r.ReadString('\n')
	if err != nil {
		t.Fatalf("no reply to %q: %v", send, err)
	}
	_, err = r.ReadByte()
	return reply, err == io.EOF
}
