package snapshotcheck

import (
	"bytes"
	"crypto/sha256"
	"io"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

func TestReader(t *testing.T) {
	db := bytes.Repeat([]byte("0123456789abcdef"), 3*512/16)
	sum := sha256.Sum256(db)
	good := append(append([]byte{}, db...), sum[:]...)
	flipped := bytes.Clone(good)
	flipped[700] ^= 1
	for name, tc := range map[string]struct {
		stream  []byte
		oneByte bool
		ok      bool
	}{
		"database and its sha256":            {stream: good, ok: true},
		"read one byte at a time":            {stream: good, oneByte: true, ok: true},
		"a flipped bit":                      {stream: flipped},
		"no trailer":                         {stream: db},
		"cut short":                          {stream: good[:len(good)-100]},
		"empty":                              {stream: []byte{}},
		"a trailer alone, read byte by byte": {stream: sum[:], oneByte: true},
	} {
		t.Run(name, func(t *testing.T) {
			var r io.Reader = bytes.NewReader(tc.stream)
			if tc.oneByte {
				r = iotest.OneByteReader(r)
			}
			v := Reader(r)
			got, err := io.ReadAll(v)
			require.Equal(t, tc.stream, got, "the stream passes through unchanged")
			if tc.ok {
				require.NoError(t, err)
				require.Equal(t, int64(len(tc.stream)), v.Size())
				return
			}
			require.ErrorIs(t, err, ErrCorrupt)
		})
	}
}
