package snapshotcheck

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"hash"
	"io"
)

// ErrCorrupt is returned by a Verifier whose stream does not
// end in the sha256 of what came before it.
var ErrCorrupt = errors.New("etcd snapshot is corrupt: its trailing sha256 does not match its content")

// Reader passes a snapshot stream through unchanged and, at its
// end, checks it the way etcdutl checks a snapshot before restoring it: the
// database is a whole number of 512-byte blocks followed by its sha256.
// Instead of io.EOF it returns ErrCorrupt when the check fails, so
// an upload reading from it fails rather than completes. It holds back
// nothing from its reader but the last sha256.Size bytes from its hash.
func Reader(r io.Reader) *Verifier {
	return &Verifier{r: r, hash: sha256.New()}
}

// Verifier is the reader Reader returns.
type Verifier struct {
	r    io.Reader
	hash hash.Hash
	// tail are the last bytes read, not hashed yet: they may be the trailer.
	tail []byte
	size int64
}

// Size is how many bytes were read, trailer included.
func (v *Verifier) Size() int64 { return v.size }

func (v *Verifier) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.size += int64(n)
	v.keepTail(p[:n])
	if errors.Is(err, io.EOF) && !v.valid() {
		return n, ErrCorrupt
	}
	return n, err
}

// keepTail hashes all but the last sha256.Size bytes seen.
func (v *Verifier) keepTail(read []byte) {
	if len(read) >= sha256.Size {
		v.hash.Write(v.tail)
		v.hash.Write(read[:len(read)-sha256.Size])
		v.tail = append(v.tail[:0], read[len(read)-sha256.Size:]...)
		return
	}
	v.tail = append(v.tail, read...)
	if extra := len(v.tail) - sha256.Size; extra > 0 {
		v.hash.Write(v.tail[:extra])
		v.tail = append(v.tail[:0], v.tail[extra:]...)
	}
}

func (v *Verifier) valid() bool {
	return v.size > sha256.Size && (v.size-sha256.Size)%512 == 0 && len(v.tail) == sha256.Size &&
		bytes.Equal(v.hash.Sum(nil), v.tail)
}
