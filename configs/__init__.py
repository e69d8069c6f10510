"""Per-task and preset YAML configs, installed as ``steinrl.configs`` (package data)."""
