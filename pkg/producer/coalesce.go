package producer

// Coalesce groups events into offers: the events of one session and target
// become one offer with a part each, in the order the events come; groups
// are ordered by their first event. Every offer gets claim(i), i counting
// the offers from 0. An Outbox with OutboxOptions.Coalesce does this in
// Poll; a producer keeping its events elsewhere may use it directly.
//
// A group offered with parts is admitted as one admission made of the parts
// whose identities are not yet admitted: offering [A] and, after a lost
// acknowledgement, [A, B] yields A's admission (a duplicate) and one new
// admission holding B's part alone.
func Coalesce(events []Event, claim func(i int) string) []Offer {
	groups := coalesceIndexes(events)
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
// in order of their first event.
func coalesceIndexes(events []Event) [][]int {
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
	return groups
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
