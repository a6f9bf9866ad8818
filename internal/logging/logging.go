package logging

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Formats are the accepted values of a log format setting.
var Formats = []string{"json", "text"}

// New returns a logger writing to stderr in format "json" or "text" at level
// "debug", "info", "warn", "error", or a number N that enables V(N) messages.
func New(format, level string) (logr.Logger, error) {
	lvl, err := ParseLevel(level)
	if err != nil {
		return logr.Discard(), err
	}
	var cfg zap.Config
	switch format {
	case "json":
		cfg = zap.NewProductionConfig()
		cfg.EncoderConfig.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	case "text":
		cfg = zap.NewDevelopmentConfig()
		cfg.Development = false
		cfg.EncoderConfig.EncodeLevel = zapcore.CapitalLevelEncoder
	default:
		return logr.Discard(), fmt.Errorf("log format %q: use json or text", format)
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.Sampling = nil
	cfg.DisableStacktrace = true
	z, err := cfg.Build()
	if err != nil {
		return logr.Discard(), fmt.Errorf("build logger: %w", err)
	}
	return zapr.NewLogger(z), nil
}

// ParseLevel maps a level name, in any case (manifests say INFO as often as
// info), or a verbosity number to a zap level.
func ParseLevel(level string) (zapcore.Level, error) {
	switch strings.ToLower(level) {
	case "debug":
		return zapcore.DebugLevel, nil
	case "info", "":
		return zapcore.InfoLevel, nil
	case "warn":
		return zapcore.WarnLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	n, err := strconv.Atoi(level)
	if err != nil || n < 0 || n > 10 {
		return zapcore.InfoLevel, fmt.Errorf("log level %q: use debug, info, warn, error or a verbosity from 0 to 10", level)
	}
	// logr's V(n) is zap level -n.
	return zapcore.Level(-n), nil
}
