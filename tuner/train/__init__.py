"""Training on Sunway: a model, a loss and an optimizer compiled into one training-step program
(tuner.ir.training builds the step; tuner.aot compiles it with the training driver), its data, its
run on the emulator and its simulated time split into forward, backward and update."""
