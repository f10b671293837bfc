// `node --import ./fs-glob-register.mjs …conformance/dist/index.js`: installs fs-glob-hooks.mjs.
import { register } from 'node:module';

register('./fs-glob-hooks.mjs', import.meta.url);
