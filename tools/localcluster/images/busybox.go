package images

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
)

// busyboxBuild compiles BusyBox BusyBoxVersion, the shell and tools of the
// conformance suite's test images, from its upstream source as Debian's
// source archive has it (the package's original tarball, which apt checks
// against BusyBoxSuite's signed index), statically, with Debian's
// configuration for busybox-static but as the upstream busybox image runs:
//   - without Debian's patches, one of which takes back upstream's keeping
//     of variables whose names are not shell names (data-1) in the
//     environment ash passes on; the Secret and ConfigMap tests print such
//     variables with sh -c env;
//   - with a shell that runs commands from the PATH, not its own applets
//     first (FEATURE_SH_STANDALONE and FEATURE_PREFER_APPLETS off).
func busyboxBuild() build {
	return build{dir: "busybox/" + BusyBoxVersion, binaries: []string{"busybox"}, run: func(ctx context.Context, r runner, out string) error {
		work, err := os.MkdirTemp("", "busybox-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(work)
		if err := r.debianSource(ctx, BusyBoxSuite, "busybox", work); err != nil {
			return err
		}
		orig := filepath.Join(work, "busybox_"+BusyBoxVersion+".orig.tar.bz2")
		debian, _ := filepath.Glob(filepath.Join(work, "busybox_"+BusyBoxVersion+"-*.debian.tar.xz"))
		if _, err := os.Stat(orig); err != nil || len(debian) != 1 {
			entries, _ := filepath.Glob(filepath.Join(work, "busybox_*"))
			return fmt.Errorf("the source package busybox of Debian %s is not BusyBox %s (got %v): update BusyBoxVersion and BusyBoxSuite",
				BusyBoxSuite, BusyBoxVersion, entries)
		}
		if err := r.run(ctx, work, "tar", "xjf", orig); err != nil {
			return err
		}
		if err := r.run(ctx, work, "tar", "xJf", debian[0]); err != nil {
			return err
		}
		src := filepath.Join(work, "busybox-"+BusyBoxVersion)
		config, err := os.ReadFile(filepath.Join(work, "debian/config/pkg/static"))
		if err != nil {
			return err
		}
		config = regexp.MustCompile(`(?m)^CONFIG_(FEATURE_SH_STANDALONE|FEATURE_PREFER_APPLETS)=y$`).
			ReplaceAll(config, []byte("# CONFIG_$1 is not set"))
		if err := os.WriteFile(filepath.Join(src, ".config"), config, 0o644); err != nil {
			return err
		}
		// Options of Debian's patches are gone; any new one takes its default.
		if err := r.run(ctx, src, "sh", "-c", "yes '' | make oldconfig >/dev/null"); err != nil {
			return err
		}
		if err := r.run(ctx, src, "make", "-s", fmt.Sprintf("-j%d", runtime.NumCPU()), "busybox"); err != nil {
			return err
		}
		return os.Rename(filepath.Join(src, "busybox"), filepath.Join(out, "busybox"))
	}}
}

// busybox is the BusyBox busyboxBuild writes.
func (r runner) busybox() string { return filepath.Join(r.bin(), busyboxBuild().dir, "busybox") }

// debianSource downloads Debian suite's source package pkg into dir with
// apt, from a list of that suite's sources kept under bin/debian/apt-<suite>
// apart from the host's own (which it leaves alone), fetched again on each
// call so that the package is the suite's current one.
func (r runner) debianSource(ctx context.Context, suite, pkg, dir string) error {
	// Absolute: apt runs in dir.
	state, err := filepath.Abs(filepath.Join(r.bin(), "debian", "apt-"+suite))
	if err != nil {
		return err
	}
	for _, d := range []string{"lists/partial", "cache/archives/partial", "sources.list.d"} {
		if err := os.MkdirAll(filepath.Join(state, d), 0o755); err != nil {
			return err
		}
	}
	sources := filepath.Join(state, "sources.list")
	if err := os.WriteFile(sources, []byte("deb-src http://deb.debian.org/debian "+suite+" main\n"), 0o644); err != nil {
		return err
	}
	// apt downloads as its own user, _apt.
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	apt := func(args ...string) error {
		options := []string{
			"-qq",
			"-o", "Dir::Etc::SourceList=" + sources, "-o", "Dir::Etc::SourceParts=" + filepath.Join(state, "sources.list.d"),
			"-o", "Dir::State::Lists=" + filepath.Join(state, "lists"), "-o", "Dir::Cache=" + filepath.Join(state, "cache"),
			"-o", "Dir::State::status=/dev/null",
		}
		return r.run(ctx, dir, "apt-get", append(options, args...)...)
	}
	if err := apt("update"); err != nil {
		return err
	}
	return apt("source", "--download-only", pkg)
}
