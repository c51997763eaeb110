// Command storehello is cmd/cobrahello linking hermesq's two stores
// (plugins/storage/bbolt and plugins/storage/redis, with bbolt, go-redis
// and the JSON codecs they use) and doing nothing with them: the bench
// measures what linking and initialising the stores adds to the start of a
// cobra+viper CLI, apart from the work of a command.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"

	_ "github.com/hermesq/hermesq/plugins/storage/bbolt"
	_ "github.com/hermesq/hermesq/plugins/storage/redis"
)

func main() {
	v := viper.New()
	v.SetEnvPrefix("HERMESQ")
	v.AutomaticEnv()
	v.SetConfigName("config")
	v.AddConfigPath(os.Getenv("XDG_CONFIG_HOME"))
	_ = v.ReadInConfig()
	root := &cobra.Command{Use: "storehello", SilenceUsage: true}
	root.AddCommand(&cobra.Command{
		Use: "admit",
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Println("hello,", v.GetString("store"))
			return err
		},
	})
	if err := root.Execute(); err != nil {
		os.Exit(1)
	}
}
