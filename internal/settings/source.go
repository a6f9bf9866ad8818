package settings

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"
)

// source binds each flag to an environment variable: the variable, when set,
// replaces the built-in default, and a flag on the command line wins over both.
type source struct {
	fs     *flag.FlagSet
	getenv func(string) string
	errs   []error
}

func newSource(name string, getenv func(string) string) *source {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &source{fs: fs, getenv: getenv}
}

func (s *source) String(p *string, name, env, def, usage string) {
	if v := s.getenv(env); v != "" {
		def = v
	}
	s.fs.StringVar(p, name, def, fmt.Sprintf("%s (env %s)", usage, env))
}

// Flag is a string set on the command line only, for a setting whose
// environment variable already means something else.
func (s *source) Flag(p *string, name, usage string) {
	s.fs.StringVar(p, name, "", usage)
}

func (s *source) Bool(p *bool, name, env string, def bool, usage string) {
	if v := s.getenv(env); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: use true or false", env, v))
		} else {
			def = b
		}
	}
	s.fs.BoolVar(p, name, def, fmt.Sprintf("%s (env %s)", usage, env))
}

func (s *source) Int(p *int, name, env string, def int, usage string) {
	if v := s.getenv(env); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: use a whole number", env, v))
		} else {
			def = n
		}
	}
	s.fs.IntVar(p, name, def, fmt.Sprintf("%s (env %s)", usage, env))
}

func (s *source) Duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	if v := s.getenv(env); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s=%q: use a duration such as 1h or 30m", env, v))
		} else {
			def = d
		}
	}
	s.fs.DurationVar(p, name, def, fmt.Sprintf("%s (env %s)", usage, env))
}

// parse reads the command line; it reports bad environment values first,
// since those came first.
func (s *source) parse(args []string) error {
	if err := s.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		s.errs = append(s.errs, err)
	}
	if s.fs.NArg() > 0 {
		s.errs = append(s.errs, fmt.Errorf("unexpected arguments %q: settings are flags or environment variables", s.fs.Args()))
	}
	return errors.Join(s.errs...)
}

// Usage prints every flag with its environment variable.
func (s *source) usage(w io.Writer) {
	s.fs.SetOutput(w)
	s.fs.PrintDefaults()
}
