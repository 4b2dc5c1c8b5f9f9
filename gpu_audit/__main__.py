from gpu_audit.cli.app import run

run()
