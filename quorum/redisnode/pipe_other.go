//go:build !unix

package redisnode

// readDirect is readRaw's place on systems without Unix read calls: the
// caller reads through a buffered reader.
func (p *pipe) readDirect() (ok bool, err error) { return false, nil }
