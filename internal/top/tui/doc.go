// Package tui is the terminal view of 'hermesq top', linked only into
// hermesq-top: a bubbletea model that reads the queue figures
// (admission.Service.Stats) and the producers' whenever the store changes
// and every few seconds (model.go), moves a selection, sorts and opens a
// session's queue on keys (model.go), and draws the list or the queue
// (view.go). The command itself, its flags and the store it opens, is
// internal/cli/top.go.
package tui
