// Command storehello is cmd/cobrahello linking hermesq's two stores
// (plugins/storage/bbolt and plugins/storage/redis, with bbolt, go-redis
// and the JSON codecs they use) and doing nothing with them: the bench
// measures what linking and initialising the stores adds to the start of a
// cobra+viper CLI, apart from the work of a command.
package main

import (
	"github.com/hermesq/hermesq/bench/internal/clihello"

	_ "github.com/hermesq/hermesq/plugins/storage/bbolt"
	_ "github.com/hermesq/hermesq/plugins/storage/redis"
)

func main() { clihello.Main("storehello") }
