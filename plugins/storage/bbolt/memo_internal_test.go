package bbolt

import "testing"

// A remembered record is returned only for the very bytes it was decoded
// from, once, and the memo stays bounded.
func TestRecMemo(t *testing.T) {
	var m recMemo
	a := admRec{ID: "a", Seq: 1, Identities: []string{"x"}}
	m.put([]byte(`{"id":"a","seq":1}`), &a)
	if _, ok := m.take([]byte(`{"id":"a","seq":2}`)); ok {
		t.Fatal("a record was taken for other bytes")
	}
	got, ok := m.take([]byte(`{"id":"a","seq":1}`))
	if !ok || got.ID != "a" || got.Seq != 1 || len(got.Identities) != 1 {
		t.Fatalf("take = %+v, %v", got, ok)
	}
	if _, ok := m.take([]byte(`{"id":"a","seq":1}`)); ok {
		t.Fatal("a record was taken twice")
	}
	for i := range 3 * memoMax {
		m.put([]byte{byte(i), byte(i >> 8)}, &a)
	}
	if n := len(m.m); n > memoMax {
		t.Fatalf("memo holds %d records, want at most %d", n, memoMax)
	}
}
