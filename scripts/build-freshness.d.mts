export declare const ROOT: string;
export declare const WEB_SRC: string;
export declare const SERVER_BUILD_INFO: string;
export declare function newestMtime(path: string, skip?: string[]): number;
export declare function dashboardIsStale(root?: string): boolean;
export declare function serverIsStale(root?: string): boolean;
