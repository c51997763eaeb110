// Command cobrahello is the smallest CLI built like hermesq's (a cobra
// root command reading its settings through viper from the environment
// and a config file), against which the bench measures what such a
// program costs to start before it does any work.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"
)

func main() {
	v := viper.New()
	v.SetEnvPrefix("HERMESQ")
	v.AutomaticEnv()
	v.SetConfigName("config")
	v.AddConfigPath(os.Getenv("XDG_CONFIG_HOME"))
	_ = v.ReadInConfig()
	root := &cobra.Command{Use: "cobrahello", SilenceUsage: true}
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
