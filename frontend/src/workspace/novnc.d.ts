// The part of noVNC's RFB class (@novnc/novnc 1.7, core/rfb.js, plain JS) the workspace uses.
declare module "@novnc/novnc" {
  export default class RFB extends EventTarget {
    constructor(target: HTMLElement, url: string, options?: { shared?: boolean; credentials?: { password?: string } });
    viewOnly: boolean;
    scaleViewport: boolean;
    clipViewport: boolean;
    resizeSession: boolean;
    focusOnClick: boolean;
    qualityLevel: number;
    background: string;
    disconnect(): void;
    focus(): void;
    sendKey(keysym: number, code: string | null, down?: boolean): void;
  }
}
