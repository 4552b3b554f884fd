package egress

import (
	"bytes"
	"io"
	"strings"
)

// replacer swaps every occurrence of each pair's first string for its
// second in a stream, including occurrences split across reads.
type replacer struct {
	src   io.Reader
	pairs [][2]string
	keep  int // bytes held back: a match may start in them
	in    []byte
	out   []byte
	eof   bool
	err   error
	buf   []byte
}

func newReplacer(src io.Reader, pairs [][2]string) *replacer {
	keep := 0
	for _, p := range pairs {
		keep = max(keep, len(p[0])-1)
	}
	return &replacer{src: src, pairs: pairs, keep: keep, buf: make([]byte, 32<<10)}
}

func (r *replacer) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.eof {
			if len(r.in) == 0 {
				return 0, io.EOF
			}
			r.process(true)
			continue
		}
		n, err := r.src.Read(r.buf)
		r.in = append(r.in, r.buf[:n]...)
		if err == io.EOF {
			r.eof = true
		} else if err != nil {
			r.err = err
		}
		r.process(r.eof)
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

// process moves everything that cannot be the start of a match from in to
// out, replaced.
func (r *replacer) process(final bool) {
	for {
		at, which := -1, -1
		for i, p := range r.pairs {
			if j := bytes.Index(r.in, []byte(p[0])); j >= 0 && (at < 0 || j < at) {
				at, which = j, i
			}
		}
		if at < 0 {
			break
		}
		r.out = append(r.out, r.in[:at]...)
		r.out = append(r.out, r.pairs[which][1]...)
		r.in = r.in[at+len(r.pairs[which][0]):]
	}
	// No whole match is left in r.in, so a match can only start in its
	// last keep bytes.
	if final {
		r.out, r.in = append(r.out, r.in...), nil
	} else if len(r.in) > r.keep {
		cut := len(r.in) - r.keep
		r.out = append(r.out, r.in[:cut]...)
		r.in = append(r.in[:0:0], r.in[cut:]...)
	}
}

// replaceString applies pairs to s.
func replaceString(s string, pairs [][2]string) string {
	for _, p := range pairs {
		s = strings.ReplaceAll(s, p[0], p[1])
	}
	return s
}
