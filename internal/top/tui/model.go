package tui

import (
	"context"
	"fmt"
	"sort"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/hermesq/hermesq/internal/top"
	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/stats"
)

// refresh is how often top reads the store without a change
// notification, so ages keep moving on a quiet store.
const refresh = 5 * time.Second

// Run shows top on o.Out, a terminal, until the operator quits or ctx
// ends, and restores the terminal.
func Run(ctx context.Context, o top.Options) error {
	m := &model{svc: o.Service, ctx: ctx, changes: o.Changes, sort: o.Sort, producers: o.Producers}
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithInput(o.In), tea.WithOutput(o.Out), tea.WithContext(ctx))
	final, err := p.Run()
	if err != nil {
		return fmt.Errorf("top: %w", err)
	}
	if fm, ok := final.(*model); ok && fm.err != nil {
		return fm.err
	}
	return nil
}

// model is the state of top's view: the latest figures, the selection, and the
// session whose queue is open ("" for the list).
type model struct {
	svc     *admission.Service
	ctx     context.Context
	changes <-chan string
	// producers reads the producers' outboxes (nil: none shown).
	producers func(context.Context) ([]stats.Producer, error)

	figures admission.Stats
	prods   []stats.Producer
	prodEr  error
	queue   []backend.Admission
	sort    string
	cursor  int
	open    string
	width   int
	height  int
	err     error
}

type (
	statsMsg struct {
		figures admission.Stats
		queue   []backend.Admission
		err     error
		// The producers' figures; an error reading them is shown, not
		// fatal.
		prods   []stats.Producer
		prodErr error
	}
	changeMsg struct{ closed bool }
	tickMsg   struct{}
)

func (m *model) Init() tea.Cmd {
	return tea.Batch(m.read(), m.waitChange(), m.tick())
}

// read loads the figures (and the open session's queue) off the UI loop.
func (m *model) read() tea.Cmd {
	open := m.open
	return func() tea.Msg {
		st, err := m.svc.Stats(m.ctx)
		var q []backend.Admission
		if err == nil && open != "" {
			q, err = m.svc.Store.ListAdmissions(m.ctx, open, backend.AdmissionFilter{
				Statuses: []backend.Status{backend.StatusQueued, backend.StatusRunning, backend.StatusUnknown}})
			if backend.CodeOf(err) == backend.CodeNotFound {
				err = nil
			}
		}
		msg := statsMsg{figures: st, queue: q, err: err}
		if m.producers != nil {
			msg.prods, msg.prodErr = m.producers(m.ctx)
		}
		return msg
	}
}

// waitChange waits for the next change notification; changes that arrive
// together are read once.
func (m *model) waitChange() tea.Cmd {
	return func() tea.Msg {
		_, ok := <-m.changes
		if !ok {
			return changeMsg{closed: true}
		}
		for {
			select {
			case _, ok := <-m.changes:
				if !ok {
					return changeMsg{}
				}
			case <-time.After(50 * time.Millisecond):
				return changeMsg{}
			}
		}
	}
}

func (m *model) tick() tea.Cmd {
	return tea.Tick(refresh, func(time.Time) tea.Msg { return tickMsg{} })
}

func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case statsMsg:
		if msg.err != nil {
			m.err = msg.err
			return m, tea.Quit
		}
		m.figures, m.queue = msg.figures, msg.queue
		m.prods, m.prodEr = msg.prods, msg.prodErr
		m.sortSessions()
		if m.cursor >= len(m.figures.Sessions) {
			m.cursor = max(len(m.figures.Sessions)-1, 0)
		}
	case changeMsg:
		if msg.closed {
			return m, nil
		}
		return m, tea.Batch(m.read(), m.waitChange())
	case tickMsg:
		return m, tea.Batch(m.read(), m.tick())
	case tea.KeyMsg:
		return m.key(msg)
	}
	return m, nil
}

func (m *model) key(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	switch k.String() {
	case "q", "ctrl+c":
		return m, tea.Quit
	case "up", "k":
		if m.open == "" && m.cursor > 0 {
			m.cursor--
		}
	case "down", "j":
		if m.open == "" && m.cursor < len(m.figures.Sessions)-1 {
			m.cursor++
		}
	case "enter":
		if m.open == "" && m.cursor < len(m.figures.Sessions) {
			m.open, m.queue = m.figures.Sessions[m.cursor].Session, nil
			return m, m.read()
		}
	case "esc", "backspace", "left", "h":
		m.open, m.queue = "", nil
	case "s":
		for i, s := range top.Sorts {
			if s == m.sort {
				m.sort = top.Sorts[(i+1)%len(top.Sorts)]
				break
			}
		}
		m.sortSessions()
	case "d", "a", "u", "n":
		m.sort = map[string]string{"d": "depth", "a": "age", "u": "unknown", "n": "session"}[k.String()]
		m.sortSessions()
	case "r":
		return m, m.read()
	}
	return m, nil
}

func (m *model) sortSessions() {
	ss := m.figures.Sessions
	sort.SliceStable(ss, func(i, j int) bool {
		a, b := ss[i], ss[j]
		switch m.sort {
		case "depth":
			if a.Depth != b.Depth {
				return a.Depth > b.Depth
			}
		case "age":
			if a.OldestQueuedAge != b.OldestQueuedAge {
				return a.OldestQueuedAge > b.OldestQueuedAge
			}
		case "unknown":
			if a.Unknown != b.Unknown {
				return a.Unknown > b.Unknown
			}
		}
		return a.Session < b.Session
	})
}
