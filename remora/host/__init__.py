"""The shared host library: the context a job's host functions close over, the functions every
agent may declare (the node, the workspace, allow-listed programs, the model, the call
explorer), and how a job gets exactly the functions its agent declares."""
