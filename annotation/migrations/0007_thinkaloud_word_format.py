"""One word format everywhere (issue 32): the full-pass transcript stored its words as
{text, start, end, probability} while steps and chunks use {w, start, end, p}; rewrite the old ones."""

from django.db import migrations


def _word(d):
    if "w" in d:
        return d
    return {
        "w": d.get("text", ""),
        "start": d.get("start", 0.0),
        "end": d.get("end", 0.0),
        "p": d.get("probability", 1.0),
    }


def forwards(apps, schema_editor):
    Recording = apps.get_model("annotation", "ThinkAloudRecording")
    for recording in Recording.objects.exclude(transcript={}).iterator():
        t = recording.transcript
        if not isinstance(t, dict):
            continue
        t["words"] = [_word(d) for d in t.get("words", []) if isinstance(d, dict)]
        for step in t.get("steps", []):
            if isinstance(step, dict):
                step["words"] = [_word(d) for d in step.get("words", []) if isinstance(d, dict)]
        recording.transcript = t
        recording.save(update_fields=["transcript"])


class Migration(migrations.Migration):
    dependencies = [("annotation", "0006_decision_claim")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
