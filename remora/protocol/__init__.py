"""What Remora and a model say to each other: chat shapes and the `ChatModel` interface
(`messages`), text completion (`completion`), confidence from log-probabilities, and
FunctionGemma's own format (`functiongemma`, one stdlib-only file the server image copies). It
imports only `findings`."""
