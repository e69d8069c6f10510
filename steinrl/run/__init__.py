"""Running algorithms: config, the Trainer, checkpoints, logging, the run loop and the CLI."""
