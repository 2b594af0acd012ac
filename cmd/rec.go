package main

import (
	"fmt"
	"github.com/redlock-proxy/redlock-proxy/internal/luashape"
)

func main() {
	for _, s := range []string{"return redis.call('flushall')", "return 1", "redis.call('set', KEYS[1], ARGV[1]) return 1"} {
		_, err := luashape.Recognise([]byte(s))
		fmt.Printf("%q -> %v\n", s, err)
	}
}
