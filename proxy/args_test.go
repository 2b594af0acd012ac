package proxy

import (
	"strconv"
	"testing"
)

func TestParseInt(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"1", 1, true},
		{"-1", -1, true},
		{"123456", 123456, true},
		{"9223372036854775807", 9223372036854775807, true},
		{"-9223372036854775808", -9223372036854775808, true},
		{"9223372036854775808", 0, false},
		{"-9223372036854775809", 0, false},
		{"99999999999999999999", 0, false},
		{"", 0, false},
		{"-", 0, false},
		{"-0", 0, false},
		{"007", 0, false},
		{"+5", 0, false},
		{" 5", 0, false},
		{"5 ", 0, false},
		{"1e3", 0, false},
		{"0x10", 0, false},
	}
	for _, tc := range tests {
		got, ok := ParseInt([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseInt(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzParseInt: ParseInt accepts exactly the canonical decimal form of an
// int64 (what strconv.FormatInt writes).
func FuzzParseInt(f *testing.F) {
	for _, s := range []string{"0", "-1", "42", "007", "+1", "9223372036854775808"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := ParseInt([]byte(s))
		std, err := strconv.ParseInt(s, 10, 64)
		canonical := err == nil && strconv.FormatInt(std, 10) == s
		if ok != canonical || (ok && n != std) {
			t.Fatalf("ParseInt(%q) = %d, %v; strconv says %d, canonical %v", s, n, ok, std, canonical)
		}
	})
}
