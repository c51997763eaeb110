package backendtest

import (
	"encoding/json"
	"testing"

	"github.com/hermesq/hermesq/pkg/backend"
)

var admissionsPartsTests = []suiteTest{
	{name: "Parts/RegroupNotesEachOnce", fn: testPartsRegroup},
	{name: "Parts/Composition", fn: testPartsComposition},
	{name: "Parts/AllHeld", fn: testPartsAllHeld},
	{name: "Parts/PayloadDiffersPerMember", fn: testPartsPayloadDiffers},
	{name: "Parts/Malformed", fn: testPartsMalformed},
}

// partsReq is an automation offer with one part per identity; texts[i] is
// the part of idents[i].
func partsReq(session string, idents []string, texts []string) backend.AdmitRequest {
	parts := make([]backend.Part, len(idents))
	for i := range idents {
		parts[i] = backend.Part{Identity: idents[i], Payload: Payload(texts[i])}
	}
	r := autoReq(session, "", idents...)
	r.Parts = parts
	r.Payload = backend.ComposeParts(parts)
	return r
}

func offerParts(t *testing.T, s backend.Store, session string, idents []string, texts []string) backend.AdmitResult {
	t.Helper()
	res := admit1(t, s, partsReq(session, idents, texts))
	noErr(t, "admit parts", res.Err)
	return res
}

// testPartsRegroup is the regrouped re-offer: [A] was admitted and its
// acknowledgement lost; [A, B] comes with a part each. A resolves to its
// admission and B's new admission carries B's part alone.
func testPartsRegroup(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	a := offerParts(t, s, "s1", []string{"A"}, []string{"RESULT_alpha"})
	diff(t, "a single part is its own payload", string(Payload("RESULT_alpha")), string(a.Admission.Payload))
	ab := offerParts(t, s, "s1", []string{"A", "B"}, []string{"RESULT_alpha", "RESULT_bravo"})
	if ab.Result != backend.ResultAdmitted {
		t.Fatalf("result %q, want admitted (B alone)", ab.Result)
	}
	diff(t, "identities", map[string]string{"A": backend.ResultDuplicate, "B": backend.ResultAdmitted}, ab.Identities)
	diff(t, "duplicates", []string{a.Admission.ID}, ab.Duplicates)
	diff(t, "B's admission identities", []string{"B"}, ab.Admission.Identities)
	diff(t, "B's admission holds B's part alone", string(Payload("RESULT_bravo")), string(ab.Admission.Payload))
	if ab.PayloadDiffers {
		t.Errorf("A's part is the one committed: payload_differs true")
	}
	diff(t, "stored B", ab.Admission, getAdmission(t, s, ab.Admission.ID))
	diff(t, "A unchanged", a.Admission, getAdmission(t, s, a.Admission.ID))
}

// testPartsComposition: the parts of several new identities are composed
// by backend.ComposeParts, byte for byte on every store, in offer order,
// whatever they contain.
func testPartsComposition(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	offerParts(t, s, "s1", []string{"B"}, []string{"held"})
	idents := []string{`["async_delegation","A",""]`, "B", `quote"back\slash`, "D"}
	texts := []string{"alpha \"quoted\"\nline\ttab \u0001 ünï €", "bravo", "charlie\\", "delta </script>"}
	res := offerParts(t, s, "s1", idents, texts)
	if res.Result != backend.ResultCoalesced {
		t.Fatalf("result %q, want coalesced", res.Result)
	}
	fresh := []backend.Part{
		{Identity: idents[0], Payload: Payload(texts[0])},
		{Identity: idents[2], Payload: Payload(texts[2])},
		{Identity: idents[3], Payload: Payload(texts[3])},
	}
	want := backend.ComposeParts(fresh)
	diff(t, "composed payload", string(want), string(res.Admission.Payload))
	diff(t, "stored payload", string(want), string(getAdmission(t, s, res.Admission.ID).Payload))
	var v struct {
		Text  string `json:"text"`
		Parts []struct {
			Identity string          `json:"identity"`
			Payload  json.RawMessage `json:"payload"`
		} `json:"parts"`
	}
	if err := json.Unmarshal(res.Admission.Payload, &v); err != nil {
		t.Fatalf("composed payload is not JSON: %v", err)
	}
	diff(t, "composed text", texts[0]+"\n"+texts[2]+"\n"+texts[3], v.Text)
	if len(v.Parts) != 3 || v.Parts[0].Identity != idents[0] || v.Parts[1].Identity != idents[2] || v.Parts[2].Identity != idents[3] {
		t.Errorf("composed parts %+v", v.Parts)
	}
	diff(t, "admission identities", []string{idents[0], idents[2], idents[3]}, res.Admission.Identities)
	// A member of a composed admission resolves to it, and its part is
	// found in it.
	re := offerParts(t, s, "s1", []string{idents[2]}, []string{texts[2]})
	if re.Result != backend.ResultDuplicate || re.Admission.ID != res.Admission.ID || re.PayloadDiffers {
		t.Errorf("re-offer of a member: result %q id %s differs %v", re.Result, re.Admission.ID, re.PayloadDiffers)
	}
}

func testPartsAllHeld(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	ab := offerParts(t, s, "s1", []string{"A", "B"}, []string{"a", "b"})
	c := offerParts(t, s, "s1", []string{"C"}, []string{"c"})
	re := offerParts(t, s, "s1", []string{"C", "A", "B"}, []string{"c", "a", "b"})
	if re.Result != backend.ResultDuplicate {
		t.Fatalf("every member held: result %q, want duplicate", re.Result)
	}
	diff(t, "resolves to the first identity's admission", c.Admission.ID, re.Admission.ID)
	diff(t, "duplicates", []string{c.Admission.ID, ab.Admission.ID}, re.Duplicates)
	if re.PayloadDiffers {
		t.Errorf("same parts: payload_differs true")
	}
	if n := len(listAdmissions(t, s, "s1", backend.AdmissionFilter{})); n != 2 {
		t.Errorf("%d admissions, want 2", n)
	}
}

func testPartsPayloadDiffers(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	offerParts(t, s, "s1", []string{"A", "B"}, []string{"a", "b"})
	offerParts(t, s, "s1", []string{"C"}, []string{"c"})
	for _, tc := range []struct {
		name   string
		idents []string
		texts  []string
		want   bool
	}{
		{"same member of a composed admission", []string{"B"}, []string{"b"}, false},
		{"other part for a member of a composed admission", []string{"B"}, []string{"b2"}, true},
		{"same single part, with a new member", []string{"C", "D"}, []string{"c", "d"}, false},
		{"other single part, with a new member", []string{"C", "E"}, []string{"c2", "e"}, true},
		{"the group's composition is not a member's part", []string{"A"}, []string{"a\nb"}, true},
	} {
		res := offerParts(t, s, "s1", tc.idents, tc.texts)
		if res.PayloadDiffers != tc.want {
			t.Errorf("%s: payload_differs %v, want %v", tc.name, res.PayloadDiffers, tc.want)
		}
	}
	// A group committed without parts: a member's part differs from the
	// group's payload unless it is that payload.
	auto(t, s, "s1", "group", "G1", "G2")
	if res := offerParts(t, s, "s1", []string{"G1"}, []string{"g1"}); !res.PayloadDiffers {
		t.Errorf("part against a group committed without parts: payload_differs false")
	}
	if res := offerParts(t, s, "s1", []string{"G2"}, []string{"group"}); res.PayloadDiffers {
		t.Errorf("part equal to the group's payload: payload_differs true")
	}
}

func testPartsMalformed(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	before := export(t, s)
	for name, mutate := range map[string]func(r *backend.AdmitRequest){
		"fewer parts than identities": func(r *backend.AdmitRequest) { r.Parts = r.Parts[:1] },
		"part for another identity":   func(r *backend.AdmitRequest) { r.Parts[1].Identity = "Z" },
		"two parts for one identity":  func(r *backend.AdmitRequest) { r.Identities[1] = "A"; r.Parts[1].Identity = "A" },
		"part without payload":        func(r *backend.AdmitRequest) { r.Parts[0].Payload = nil },
		"human input with parts": func(r *backend.AdmitRequest) {
			r.Kind, r.Producer, r.Identities = backend.KindHuman, "", nil
		},
	} {
		r := partsReq("s1", []string{"A", "B"}, []string{"a", "b"})
		mutate(&r)
		res := admit1(t, s, r)
		wantErr(t, name, res.Err, backend.ErrInvalid)
	}
	diff(t, "store after malformed offers", before, export(t, s))
}
