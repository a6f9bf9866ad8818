package logging

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
)

func TestParseLevel(t *testing.T) {
	for in, want := range map[string]zapcore.Level{
		"debug": zapcore.DebugLevel, "info": zapcore.InfoLevel, "": zapcore.InfoLevel,
		"warn": zapcore.WarnLevel, "error": zapcore.ErrorLevel, "0": zapcore.InfoLevel, "4": zapcore.Level(-4),
		"INFO": zapcore.InfoLevel, "DEBUG": zapcore.DebugLevel, "Warn": zapcore.WarnLevel, "ERROR": zapcore.ErrorLevel,
	} {
		got, err := ParseLevel(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"verbose", "-1", "11"} {
		_, err := ParseLevel(in)
		assert.ErrorContains(t, err, "use debug, info, warn, error or a verbosity from 0 to 10", in)
	}
}

func TestNewRejectsUnknownFormat(t *testing.T) {
	_, err := New("xml", "info")
	assert.EqualError(t, err, `log format "xml": use json or text`)
	for _, f := range Formats {
		_, err := New(f, "info")
		assert.NoError(t, err, f)
	}
}
