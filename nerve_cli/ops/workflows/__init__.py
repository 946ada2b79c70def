"""Workflow operations behind `nerve workflow …`, `nerve thread …` and `nerve doctor`.

Scaffold a workflow, run one thread standalone, list and show threads, rebuild
workflow_runs from the logs. The pure automaton they drive is `nerve_cli.automaton`.
"""
