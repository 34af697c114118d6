"""Think-aloud speech: decode browser audio chunks, transcribe with faster-whisper, align to actions.

Modules: `audio` (decode + session-clock timeline), `transcribe` (Whisper with a silence gate),
`align` (words -> steps, `move_boundary`), `refine` (optional LLM clean-up), `pipeline` (all of it
in one call), `synth` + `wer` + `bench` (synthetic ground truth and the benchmark). Nothing here
imports Django; heavy imports stay in the modules that need them.
"""
