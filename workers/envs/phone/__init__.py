"""Phone sandboxes: Pixel 7 emulation in Chromium (`env.PhoneEnv`) and an ADB driver (`adb`)."""
