"""The engine's workflow manager: `manager` (the kinds and the pump) calls down into one owner per decision:
`admission` (start, queue or drop), `spawn` (a worker's life and what its lines mean), `recovery` (threads
whose worker, file or time ran out), `gates` (waiting threads), `waits` (which event resumes a thread
waiting for one), all writing through `journal`; `kind` holds a workflow kind's state."""
