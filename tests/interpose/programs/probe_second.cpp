extern "C" __attribute__((visibility("default"))) int kcap_probe_value() { return 2; }
