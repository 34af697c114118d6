"""Think-aloud (issue 6): the annotator's recorded speech, transcribed and aligned to their steps.

`services` writes (uploads, the live and final transcription passes, edits), `selectors` reads.
The speech recognition and alignment themselves are plain Python in workers/asr.
"""
