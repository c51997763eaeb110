package producer

import (
	"bytes"
	"encoding/json"
)

// Coalesce groups events into offers: the events of one session and target
// become one offer with a part each, in the order the events come; groups
// are ordered by their first event. A group whose composed payload would
// be larger than limit bytes (ComposedSize; limit 0: no limit) is cut, in
// order, into groups that fit. Every offer gets claim(i), i counting the
// offers from 0. An Outbox with OutboxOptions.Coalesce does this in Poll,
// with the limit the host gives (PollRequest.PayloadLimit); a producer
// keeping its events elsewhere may use it directly.
//
// A group offered with parts is admitted as one admission made of the parts
// whose identities are not yet admitted: offering [A] and, after a lost
// acknowledgement, [A, B] yields A's admission (a duplicate) and one new
// admission holding B's part alone.
func Coalesce(events []Event, limit int, claim func(i int) string) []Offer {
	groups := coalesceIndexes(events, limit)
	out := make([]Offer, len(groups))
	for gi, g := range groups {
		evs := make([]Event, len(g))
		for j, i := range g {
			evs[j] = events[i]
		}
		out[gi] = makeOffer(evs, claim(gi), true)
	}
	return out
}

// coalesceIndexes groups the indexes of events by (session, target), groups
// in order of their first event, each cut into groups whose composed
// payload fits limit (0: no limit).
func coalesceIndexes(events []Event, limit int) [][]int {
	type key struct{ session, target string }
	at := map[key]int{}
	var groups [][]int
	for i, e := range events {
		k := key{e.Session, e.Target}
		g, ok := at[k]
		if !ok {
			g = len(groups)
			at[k] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	if limit <= 0 {
		return groups
	}
	var out [][]int
	for _, g := range groups {
		var cur []int
		var sz composer
		for _, i := range g {
			if len(cur) > 0 && sz.with(events[i]) > limit {
				out = append(out, cur)
				cur, sz = nil, composer{}
			}
			cur = append(cur, i)
			sz.add(events[i])
		}
		out = append(out, cur)
	}
	return out
}

// ComposedSize is the size in bytes of the payload the store composes of
// events offered as one group with a part each (one event: its own
// payload), by the rule every store composes with:
//
//	{"parts":[{"identity":ID,"payload":P},…],"text":T}
//
// where each P is the event's canonical payload ({"text":…} for a text)
// and T joins their texts with a newline: each text is held about twice.
// It is exact for text events and for payloads already in canonical form
// (the host checks the exact size again and splits a group that does not
// fit).
func ComposedSize(events []Event) int {
	var c composer
	for _, e := range events {
		c.add(e)
	}
	return c.size()
}

// composer sums the size of a composed payload as events are added.
type composer struct {
	n       int // parts
	members int // bytes of the members of "parts", commas included
	texts   int // bytes of the joined text, separators included
	single  int // the payload's size when n == 1
}

func (c *composer) add(e Event) {
	payload, text := eventPayloadSize(e)
	if c.n > 0 {
		c.members++  // ,
		c.texts += 2 // \n
	}
	c.n++
	c.single = payload
	c.members += len(`{"identity":`) + quotedLen(e.Identity) + len(`,"payload":`) + payload + len(`}`)
	c.texts += text
}

func (c *composer) size() int {
	switch c.n {
	case 0:
		return 0
	case 1:
		return c.single
	}
	return len(`{"parts":[`) + c.members + len(`],"text":"`) + c.texts + len(`"}`)
}

// with is the size once e is added too.
func (c composer) with(e Event) int {
	c.add(e)
	return c.size()
}

// eventPayloadSize is the size of an event's canonical payload and of its
// text as it stands between the quotes of a JSON string.
func eventPayloadSize(e Event) (payload, text int) {
	if len(e.Payload) == 0 {
		t := quotedLen(e.Text) - 2
		return len(`{"text":`) + t + 2 + len(`}`), t
	}
	var buf bytes.Buffer
	if json.Compact(&buf, e.Payload) != nil {
		buf.Reset()
		buf.Write(e.Payload)
	}
	var v struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(e.Payload, &v)
	return buf.Len(), quotedLen(v.Text) - 2
}

// quotedLen is the length of s quoted as canonical JSON writes strings:
// only the quote, the backslash and control characters escaped (\b \f \n
// \r \t, else \u00XX), everything else as it is.
func quotedLen(s string) int {
	n := 2
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"', c == '\\', c == '\b', c == '\f', c == '\n', c == '\r', c == '\t':
			n += 2
		case c < 0x20:
			n += 6
		default:
			n++
		}
	}
	return n
}

// makeOffer builds the offer of events of one session and target: with
// parts when coalescing, else (one event) with its identity and its text or
// payload.
func makeOffer(events []Event, claim string, parts bool) Offer {
	o := Offer{Session: events[0].Session, Target: events[0].Target, Claim: claim}
	if !parts && len(events) == 1 {
		e := events[0]
		o.Identities = []string{e.Identity}
		o.Text, o.Payload = e.Text, e.Payload
		return o
	}
	for _, e := range events {
		o.Parts = append(o.Parts, Part{Identity: e.Identity, Text: e.Text, Payload: e.Payload})
	}
	return o
}
