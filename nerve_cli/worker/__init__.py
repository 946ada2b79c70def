"""The child processes (`python -m nerve_cli.worker`): the sense worker (`sense_runtime`, a group's computes),
the workflow worker (`thread_host`, one workflow's threads) and the code check (`check`)."""
