package backend

import (
	"slices"
	"strings"
	"testing"
)

// Every credential-bearing part of a store URL is redacted by the one
// function every message uses: the user-info password (or a lone user
// part), the value of every query parameter not known to be harmless, and
// a fragment; the rest is shown as written.
func TestRedactURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://u:S3cr3t@127.0.0.1:6379/0", "redis://u:xxxxx@127.0.0.1:6379/0"},
		{"redis://S3cr3t@127.0.0.1:6379/0", "redis://xxxxx@127.0.0.1:6379/0"},
		{"redis://127.0.0.1:6379/0?password=S3cr3t", "redis://127.0.0.1:6379/0?password=xxxxx"},
		{"redis://127.0.0.1:6379/0?prefix=hq&pass=S3cr3t&token=S3cr3t", "redis://127.0.0.1:6379/0?prefix=hq&pass=xxxxx&token=xxxxx"},
		{"redis://127.0.0.1:6379/0?Password=S3cr3t&password=S3cr3t", "redis://127.0.0.1:6379/0?Password=xxxxx&password=xxxxx"},
		{"redis://127.0.0.1:6379/0?x=%zzS3cr3t", "redis://127.0.0.1:6379/0?x=xxxxx"},
		{"redis://127.0.0.1:6379/0?%zz=S3cr3t", "redis://127.0.0.1:6379/0?xxxxx"},
		{"redis://127.0.0.1:6379/0#S3cr3t", "redis://127.0.0.1:6379/0#xxxxx"},
		{"rediss://h:6380/0?ca=/etc/ca.pem&cert=/c.pem&key=/k.pem&server_name=h&insecure_skip_verify=false", "rediss://h:6380/0?ca=/etc/ca.pem&cert=/c.pem&key=/k.pem&server_name=h&insecure_skip_verify=false"},
		{"redis://a:1,b:2/0?cluster=1&sentinel=m", "redis://a:1,b:2/0?cluster=1&sentinel=m"},
		{"bbolt:///var/lib/hq.db?password=S3cr3t", "bbolt:///var/lib/hq.db?password=xxxxx"},
	} {
		got := Redact(c.in)
		if got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.Contains(got, "S3cr3t") {
			t.Errorf("Redact(%q) shows the secret: %q", c.in, got)
		}
	}
	if got := Redact("redis://u:S3cr3t@h:bad port/0"); strings.Contains(got, "S3cr3t") {
		t.Errorf("an unparsable URL is shown: %q", got)
	}
}

// URLSecrets names what RedactURL hides, for the handler's environment.
func TestURLSecrets(t *testing.T) {
	got := URLSecrets("redis://u:pw1@h:1/0?prefix=hq&password=pw2&key=/k.pem#pw3")
	if !slices.Equal(got, []string{"pw1", "pw2", "pw3"}) {
		t.Errorf("URLSecrets = %q", got)
	}
}
