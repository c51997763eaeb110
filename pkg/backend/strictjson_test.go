package backend

import "testing"

// BenchmarkStrictObjectLine reads one `admit --batch` line of automation
// input, as the bench's batch figures write them.
func BenchmarkStrictObjectLine(b *testing.B) {
	line := []byte(`{"session":"b","producer":"bench","identities":["completion:b:12345"],"text":"[finished] make test (exit 0)"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := StrictObject(line, "input line", "session", "producer", "identities", "text"); err != nil {
			b.Fatal(err)
		}
	}
}

// StrictObject's plain-string path and its decoding path read keys alike:
// a duplicate is refused whether either copy is written plainly or with
// escapes, in the top-level object and in a nested one.
func TestStrictObjectDuplicateKeys(t *testing.T) {
	for _, line := range []string{
		`{"text":"a","text":"b"}`,
		`{"text":"a","te\u0078t":"b"}`,
		`{"te\u0078t":"a","text":"b"}`,
		`{"payload":{"k":1,"k":2}}`,
		`{"payload":{"k":1,"\u006b":2}}`,
		`{"payload":{"é":1,"\u00e9":2}}`,
	} {
		if _, err := StrictObject([]byte(line), "input line", "text", "payload"); err == nil {
			t.Errorf("%s: accepted, want a duplicate key refused", line)
		}
	}
	if m, err := StrictObject([]byte(`{"text":"a\u00e9","payload":{"k":"é"}}`), "input line", "text", "payload"); err != nil || string(m["text"]) != `"a\u00e9"` {
		t.Fatalf("got %q, %v", m, err)
	}
}
