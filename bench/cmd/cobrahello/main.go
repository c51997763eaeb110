// Command cobrahello is the smallest CLI built like hermesq's (a cobra
// root command reading its settings through viper from the environment
// and a config file), against which the bench measures what such a
// program costs to start before it does any work.
package main

import "github.com/hermesq/hermesq/bench/internal/clihello"

func main() { clihello.Main("cobrahello") }
