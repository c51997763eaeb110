// Package top is what the command 'hermesq top' (internal/cli/top.go) and
// its terminal view (package top/tui) share: the sort orders and the
// options of a view. It links no terminal library, so that hermesq, which
// hands 'top' to hermesq-top, starts without one.
package top
