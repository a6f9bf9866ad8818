package local

import (
	"fmt"
	"os"
	"strings"
)

// HostsFile is where a newcomer's kubectl looks names up first.
const HostsFile = "/etc/hosts"

// hostsMarker ends every line AddHosts writes, so that RemoveHosts removes
// those and no other.
const hostsMarker = "# hostedcp-e2e"

// AddHosts appends a line naming addr for each name to the hosts file, in
// place (in a container /etc/hosts is a bind mount and cannot be
// replaced). The quickstart's gateway hostnames are published only by the
// local cluster's DNS, which the host's resolver does not ask.
func AddHosts(file, addr string, names ...string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	text := string(b)
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	for _, name := range names {
		line := fmt.Sprintf("%s %s %s", addr, name, hostsMarker)
		if !strings.Contains(text, line+"\n") {
			text += line + "\n"
		}
	}
	return os.WriteFile(file, []byte(text), 0o644)
}

// RemoveHosts removes the lines AddHosts wrote; it changes nothing when
// there are none.
func RemoveHosts(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	lines := strings.SplitAfter(string(b), "\n")
	kept := lines[:0]
	for _, l := range lines {
		if !strings.HasSuffix(strings.TrimRight(l, "\n"), " "+hostsMarker) {
			kept = append(kept, l)
		}
	}
	if len(kept) == len(lines) {
		return nil
	}
	return os.WriteFile(file, []byte(strings.Join(kept, "")), 0o644)
}
